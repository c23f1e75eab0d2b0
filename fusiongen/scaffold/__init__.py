"""Files fusiongen writes once and then leaves to the user: the handler module and `init`'s starter project."""
