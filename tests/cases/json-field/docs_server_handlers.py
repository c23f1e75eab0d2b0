"""Handlers of the json-field case."""


def doc_put(args):
    return {"id": args.id, "meta": args.meta}
