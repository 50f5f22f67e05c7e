"""Co-evolution: the teacher-abstractor, validated composite insertion, conservative acceptance.

    from cocoda_jax.coevolve import SymbolicAbstractor, validate, warm_library
    cands = SymbolicAbstractor().propose(trajectories, snapshot)      # compression-scored composites
    result = validate(cands, traces, snapshot, sandbox)                # rewrite + sandbox + specs + INSERTTOOL
    result.snapshot, result.traces, result.rejections
    incumbent, decision = acceptance.decide(incumbent, proposal, AcceptanceConfig(tolerance=0.01))
"""

from cocoda_jax.coevolve import acceptance
from cocoda_jax.coevolve.abstractor import (
    Abstractor, AbstractorConfig, Candidate, CombinedAbstractor, NotStraightLine, Pattern, Score, SymbolicAbstractor, Use,
    candidate_from_tool, pattern_from_source, propose, rewrite,
)
from cocoda_jax.coevolve.acceptance import AcceptanceConfig, Decision, Incumbent, Proposal, decide, run_rounds
from cocoda_jax.coevolve.rounds import RoundOutcome, WarmLibrary, abstraction_round, warm_library
from cocoda_jax.coevolve.teacher import (
    ERROR_KINDS, ProposalError, TeacherAbstractor, TeacherConfig, TeacherProposals, build_messages,
    candidates_from_reply, parse_reply,
)
from cocoda_jax.coevolve.traces import Trace, TraceError, trace_from_program, trace_from_trajectory
from cocoda_jax.coevolve.validate import (
    Refactoring, Rejection, ValidationConfig, ValidationResult, play_programs, refactored_demonstrations, validate,
)

__all__ = [
    "ERROR_KINDS", "ProposalError", "TeacherAbstractor", "TeacherConfig", "TeacherProposals", "build_messages",
    "candidates_from_reply", "parse_reply",
    "Abstractor", "AbstractorConfig", "AcceptanceConfig", "Candidate", "CombinedAbstractor", "Decision", "Incumbent", "NotStraightLine",
    "Pattern", "Proposal", "Refactoring", "Rejection", "RoundOutcome", "Score", "SymbolicAbstractor", "Trace",
    "TraceError", "Use", "ValidationConfig", "ValidationResult", "WarmLibrary", "abstraction_round", "acceptance",
    "candidate_from_tool", "decide", "pattern_from_source", "play_programs", "propose", "refactored_demonstrations",
    "rewrite", "run_rounds", "trace_from_program", "trace_from_trajectory", "validate", "warm_library",
]
