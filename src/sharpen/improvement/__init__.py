"""Improvement: proposers suggest AgentSpecs, the engine gates, validates and archives them
within a budget, and the experiment proves the winner on held-out tasks (docs/improve.md).

Proposers register as plug-in kind ``proposer`` (``sharpen.improvement.proposers``)."""

from sharpen.improvement.budget import Budget, Spend
from sharpen.improvement.candidate import Archive, Candidate
from sharpen.improvement.engine import Engine, EngineConfig
from sharpen.improvement.evaluate import Evaluator
from sharpen.improvement.experiment import Experiment, ExperimentConfig, ExperimentResult
from sharpen.improvement.proposal import (
    InvalidProposal,
    NothingToPropose,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerLLM,
)

__all__ = [
    "Archive", "Budget", "Candidate", "Engine", "EngineConfig", "Evaluator", "Experiment",
    "ExperimentConfig", "ExperimentResult", "InvalidProposal", "NothingToPropose", "Proposal",
    "ProposalContext", "Proposer", "ProposerLLM", "Spend",
]
