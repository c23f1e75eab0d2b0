"""Handlers of the map-field case."""


def stock_set(args):
    return {"prices": args.prices, "bins": args.bins}
