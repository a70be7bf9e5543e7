"""Behavior Judge: zoom-augmented behavior narratives per rollout and one multiple-choice
comparison that picks the best rollout; pairwise and independent-scoring baselines.

Empty until the judge lands."""
