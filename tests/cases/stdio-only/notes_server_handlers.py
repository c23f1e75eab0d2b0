def note_get(args):
    return {"id": args.id, "text": "a note"}
