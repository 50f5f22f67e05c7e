"""An OpenAI-compatible teacher endpoint (stdlib HTTP client; optional, used by the teacher abstractor).

    from third_party.teacher import ChatClient, TeacherEndpointConfig
    text = ChatClient(TeacherEndpointConfig(base_url="http://127.0.0.1:8000", model="m")).complete(messages)
"""

from third_party.teacher.openai_client import (
    RETRY_STATUS, ChatClient, TeacherConnectionError, TeacherEndpointConfig, TeacherError, TeacherHTTPError,
    TeacherResponseError, TeacherTimeout, parse_completion,
)

__all__ = [
    "ChatClient", "RETRY_STATUS", "TeacherConnectionError", "TeacherEndpointConfig", "TeacherError",
    "TeacherHTTPError", "TeacherResponseError", "TeacherTimeout", "parse_completion",
]
