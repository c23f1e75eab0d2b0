"""Handlers of the constraints case."""


def order_place(args):
    return None
