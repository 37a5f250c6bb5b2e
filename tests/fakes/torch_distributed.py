import types

group = types.SimpleNamespace(WORLD=types.SimpleNamespace(group_name="0"))


def init_process_group(*args, **kwargs):
    pass


def destroy_process_group():
    pass
