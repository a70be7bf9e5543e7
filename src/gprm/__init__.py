"""GUI-PRA step guide: scores K candidate actions with dynamic memory and UI perception
tools and picks the best; also the standard-PRM baseline.

Empty until the guide lands."""
