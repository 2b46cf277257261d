"""What an admin key sees that a tenant does not."""
