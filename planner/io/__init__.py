"""Reading what users write: model, hardware and engine catalogs, YAML, Hugging Face config.json, plan
files, runs files."""
