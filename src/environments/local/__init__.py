"""Local virtual desktops: Xvfb + openbox + real apps + a controller server, pooled.

`LocalProvider` starts N isolated desktops in parallel and lends them out as `Environment`
objects; `LocalDesktop` is one desktop; snapshots are cached home templates that revert
restores in a fraction of a second.
"""

from .desktop import DesktopConfig, DesktopInfo, LocalDesktop
from .environment import LocalEnvironment
from .measure import DesktopFigures, measure_desktops
from .provider import LocalProvider, default_base_dir
from .snapshot import SNAPSHOTS, AppLaunch, SnapshotSpec

__all__ = [
    "SNAPSHOTS",
    "AppLaunch",
    "DesktopConfig",
    "DesktopFigures",
    "DesktopInfo",
    "LocalDesktop",
    "LocalEnvironment",
    "LocalProvider",
    "SnapshotSpec",
    "default_base_dir",
    "measure_desktops",
]
