"""Share: check, test, describe, sign, lock and publish the built variants."""
