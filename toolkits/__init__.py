"""Host side of tools: decorators, registry, the JSON-RPC bridge dispatcher, stubs, built-ins.

::

    @toolkit(name="devops", description="DevOps platform: projects, deployments")
    class DevOps:
        @operation
        async def get_project_info(self, project_id: str) -> dict:
            \"\"\"Basic info of a project.\"\"\"

    registry = ToolkitRegistry.from_entry_points()      # built-ins (system) + installed packages
    registry.register(DevOps)
    bridge = ToolkitBridge(registry, grants={"devops": "*", "system": "*"}, session_id="s1")
    prompt_section = bridge.stubs()                    # what the model reads
"""

from __future__ import annotations

from codeact.toolkits._grants import Grants
from codeact.toolkits.bound import BoundToolkit, bind_toolkit
from codeact.toolkits.bridge import CallLog, ToolkitBridge
from codeact.toolkits.budget import DEFAULT_BUDGETS, BudgetMeter, CallBudgets
from codeact.toolkits.context import Control, EventSink, MemoryAccess, ModelAccess, ToolkitContext
from codeact.toolkits.decorators import operation, toolkit
from codeact.toolkits.dynamic import DynamicToolkit
from codeact.toolkits.errors import (
    DuplicateToolkitError,
    ToolkitDefinitionError,
    ToolkitError,
    ToolkitLoadError,
    ToolkitNotFoundError,
)
from codeact.toolkits.pipeline import (
    AWAITING_APPROVAL,
    Approval,
    ApprovalGate,
    Asker,
    Call,
    CallNext,
    CallOutcome,
    CallWrapper,
    encode_error,
)
from codeact.toolkits.records import ApprovalDecision, ApprovalRequest, Approver, CallRecord, RecordCaps, cap_calls
from codeact.toolkits.registry import ENTRY_POINT_GROUP, ToolkitRegistry, load_registry, load_toolkit_ref
from codeact.toolkits.spec import OperationApproval, OperationSpec, ParameterKind, ParameterSpec
from codeact.toolkits.stubs import openai_tools, render_stubs
from codeact.toolkits.tasks import TaskBoard

__all__ = [
    "AWAITING_APPROVAL",
    "Approval",
    "ApprovalDecision",
    "ApprovalGate",
    "ApprovalRequest",
    "Approver",
    "Asker",
    "BoundToolkit",
    "BudgetMeter",
    "Call",
    "CallBudgets",
    "CallLog",
    "CallNext",
    "CallOutcome",
    "CallRecord",
    "CallWrapper",
    "Control",
    "DEFAULT_BUDGETS",
    "DuplicateToolkitError",
    "DynamicToolkit",
    "ENTRY_POINT_GROUP",
    "EventSink",
    "Grants",
    "MemoryAccess",
    "ModelAccess",
    "OperationApproval",
    "OperationSpec",
    "ParameterKind",
    "ParameterSpec",
    "RecordCaps",
    "TaskBoard",
    "ToolkitBridge",
    "ToolkitContext",
    "ToolkitDefinitionError",
    "ToolkitError",
    "ToolkitLoadError",
    "ToolkitNotFoundError",
    "ToolkitRegistry",
    "bind_toolkit",
    "cap_calls",
    "encode_error",
    "load_registry",
    "load_toolkit_ref",
    "openai_tools",
    "operation",
    "render_stubs",
    "toolkit",
]
