"""Our own small action samples: a trajectory per embodiment and a drive rendered along it.

The real checkpoints were trained on driving logs and robot datasets we cannot ship; these stand in for them in
the cookbooks and tests: a video and the trajectory that made it belong together (inverse dynamics' input and its
expected answer).
"""

from __future__ import annotations

import numpy as np

from .protocol import action as proto
from .trajectories import integrate_poses, pose_deltas, yaw_matrix

SKY = np.array([150, 190, 235], dtype=np.uint8)
GROUND = np.array([96, 100, 92], dtype=np.uint8)


def sample_trajectory(embodiment: str, steps: int, *, speed: float = 0.5, turn_deg: float = 2.0) -> np.ndarray:
    """``(steps, D)`` float32 for ``embodiment``: forward ``speed`` per step while turning ``turn_deg`` per step;
    every further 9-D pose block repeats the motion at a tenth of the size, every grasp value closes (0 -> 1) at
    half-way. Pose-only embodiments (``av``, ``camera_pose``) get the 9-D pose."""
    width = proto.RAW_DIM[embodiment]
    t = np.arange(steps)
    yaw = np.full(steps, np.radians(turn_deg))
    translation = np.stack([np.full(steps, speed), 0.02 * speed * np.sin(t / 3.0), np.zeros(steps)], axis=-1)
    pose = pose_deltas(translation, yaw_matrix(yaw))
    rows = [pose] if width >= proto.POSE_DIM else []
    used = proto.POSE_DIM if width >= proto.POSE_DIM else 0
    while width - used >= proto.POSE_DIM + 1:  # further arms: a smaller pose delta and a gripper each
        rows += [pose_deltas(translation * 0.1, yaw_matrix(yaw * 0.5)), (t >= steps // 2)[:, None].astype(np.float32)]
        used += proto.POSE_DIM + 1
    if width - used > 0:
        rows.append(np.repeat((t >= steps // 2)[:, None], width - used, axis=1).astype(np.float32))
    return np.concatenate(rows, axis=1)[:, :width].astype(np.float32)


def render_drive(actions: np.ndarray, width: int = 128, height: int = 80, *, seed: int = 3,
                 camera_height: float = 1.2, focal: float | None = None) -> np.ndarray:
    """uint8 ``(T + 1, height, width, 3)``: the view from a camera that starts at the origin looking along +x
    (z up) and moves by each row's pose delta, over a road lined with coloured posts."""
    positions, rotations = integrate_poses(actions)
    rng = np.random.default_rng(seed)
    length = float(np.abs(positions[:, 0]).max() + np.abs(positions[:, 1]).max()) + 30.0
    count = 60
    posts = np.stack([rng.uniform(2.0, length, count), rng.choice([-1.0, 1.0], count) * rng.uniform(2.5, 6.0, count),
                      np.zeros(count)], axis=-1)
    colours = rng.integers(40, 255, (count, 3)).astype(np.uint8)
    focal = focal or 0.9 * width
    frames = []
    for position, rotation in zip(positions, rotations):
        frame = np.empty((height, width, 3), dtype=np.uint8)
        horizon = height // 2
        frame[:horizon], frame[horizon:] = SKY, GROUND
        local = (posts - position) @ rotation  # world -> camera axes (x forward, y left, z up)
        for index in np.argsort(-local[:, 0]):  # far to near
            depth, side = local[index, 0], local[index, 1]
            if depth < 0.5:
                continue
            u = width / 2 - focal * side / depth
            half = max(1.0, focal * 0.25 / depth)
            top, bottom = horizon - focal * (2.5 - camera_height) / depth, horizon + focal * camera_height / depth
            x0, x1 = int(max(0, u - half)), int(min(width, u + half + 1))
            y0, y1 = int(max(0, top)), int(min(height, bottom + 1))
            if x0 < x1 and y0 < y1:
                frame[y0:y1, x0:x1] = colours[index]
        frames.append(frame)
    return np.stack(frames)
