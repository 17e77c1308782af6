"""Training data from stored runs (``sharpen export``): SFT, preference pairs, RL groups."""

from sharpen.train.export import FORMATS, ExportCount, FeedbackCondition, Where, export

__all__ = ["FORMATS", "ExportCount", "FeedbackCondition", "Where", "export"]
