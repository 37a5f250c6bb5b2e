"""resolve.py FILE CHOICE... : each conflict hunk in order takes 'ours', 'theirs', 'both' (ours then theirs), or '@path' (text of that file)."""
import re, sys
path, choices = sys.argv[1], sys.argv[2:]
text = open(path).read()
pattern = re.compile(r"<<<<<<< [^\n]*\n(.*?)(?:\|\|\|\|\|\|\| [^\n]*\n.*?)?=======\n(.*?)>>>>>>> [^\n]*\n", re.S)
hunks = pattern.findall(text)
assert len(hunks) == len(choices), (len(hunks), choices)
it = iter(choices)
def pick(m):
    c = next(it)
    ours, theirs = m.group(1), m.group(2)
    if c == "ours": return ours
    if c == "theirs": return theirs
    if c == "both": return ours + theirs
    return open(c[1:]).read()
open(path, "w").write(pattern.sub(pick, text))
