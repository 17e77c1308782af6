"""Built-in proposers. Importing a module registers its proposer (kind ``proposer``)."""
