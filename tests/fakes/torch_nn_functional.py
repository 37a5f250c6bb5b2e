import torch


def conv2d(*args, **kwargs):
    return torch.Tensor()
