"""Handlers of the object-fields case."""


def order_place(args):
    return {"id": "o-1", "address": args.address, "lines": args.lines}


def order_summary(args):
    return {"id": args.id, "totals": {"count": 1, "amount": 9.5}}
