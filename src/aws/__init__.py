"""EC2 fleet for OSWorld desktop images: launch, tag, wait, revert, terminate and reap.

Empty until the fleet lands; only `environments` may import it."""
