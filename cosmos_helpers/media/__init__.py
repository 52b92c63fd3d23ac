"""The one reader and writer of images, video and sound (PyAV), every write published whole or not at all, never
clobbering, with the mode the umask gives (:mod:`.atomic`). Every name is exported here (``media.read_video``)."""

from __future__ import annotations

from .atomic import atomic_path, copy_file_atomic, file_sha256, write_bytes_atomic
from .encode import DEFAULT_CRF, even_size, write_mp4, write_wav
from .image import (IMAGE_SUFFIXES, center_crop_to_aspect, check_image, image_bytes, load_image, read_image, to_uint8,
                    write_png)
from .video import (VideoData, check_video, describe_media, fit_to_bucket, iter_frames, load_video_frames, probe_video,
                    read_audio, read_media, read_video)

__all__ = ["DEFAULT_CRF", "IMAGE_SUFFIXES", "VideoData", "atomic_path", "center_crop_to_aspect", "check_image",
           "check_video", "copy_file_atomic", "describe_media", "even_size", "file_sha256", "fit_to_bucket",
           "image_bytes", "iter_frames", "load_image", "load_video_frames", "probe_video", "read_audio", "read_image",
           "read_media", "read_video", "to_uint8", "write_bytes_atomic", "write_mp4", "write_png", "write_wav"]
