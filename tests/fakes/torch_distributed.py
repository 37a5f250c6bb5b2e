import types

group = types.SimpleNamespace(WORLD=types.SimpleNamespace(group_name="0"))


def init_process_group(*args, **kwargs):
    pass


def destroy_process_group():
    pass


class TCPStore:
    """torch's store as the payloads use it (_common.rendezvous): `port` is the one it listens on, rank 0's given by
    the kernel where it asked for port 0."""

    def __init__(self, host_name, port, world_size=None, is_master=False, **kwargs):
        self.port = port or 29500
