"""Print {normalized distribution name: version} of this environment as one JSON line; imports nothing."""

import json
import re
from importlib import metadata

found = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"] or ""
    if name:
        found[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
print(json.dumps(found))
