"""The ground floor: errors, safe writes, bounded reads and build-folder marks every wing uses."""
