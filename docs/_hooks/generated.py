"""mkdocs hook: the reference tables generated from the provider's own code (filled in below)."""
