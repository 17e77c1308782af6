"""Improvement: proposers suggest AgentSpecs, the engine gates, validates and archives them
within a budget, and the experiment proves the winner on held-out tasks (docs/improve.md).

Proposers register as plug-in kind ``proposer`` (``sharpen.improve.proposers``)."""

from sharpen.improve.budget import Budget, Spend
from sharpen.improve.candidate import Archive, Candidate
from sharpen.improve.engine import Engine, EngineConfig
from sharpen.improve.evaluate import Evaluator
from sharpen.improve.experiment import Experiment, ExperimentConfig, ExperimentResult
from sharpen.improve.proposal import (
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
