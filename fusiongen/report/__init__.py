"""Reports computed from the validated IR alone: what a server exposes (`explain`), how two specs differ (`diff`)."""
