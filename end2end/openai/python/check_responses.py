"""The official `openai` Python client, unchanged, against agentstream's Responses API.

Run by end2end/tests/openai-python.spec.ts in a virtual environment per pinned version
(requirements-*.txt): `python check_responses.py <server base URL> [--agents]`. Exits non-zero
with the failed check's message. `--agents` also runs an OpenAI Agents SDK agent (openai-agents
needs openai 3).
"""

import asyncio
import json
import sys

import openai
from openai import OpenAI

CONFIRM_TOOL = {
    "type": "function",
    "name": "confirm",
    "description": "Ask the user to confirm a number",
    "parameters": {
        "type": "object",
        "properties": {"q": {"type": "number"}},
        "required": ["q"],
        "additionalProperties": False,
    },
    "strict": True,
}


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def text_of(response):
    return "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )


def numbers(events):
    return [event.sequence_number for event in events]


def creates(client):
    response = client.responses.create(model="scripted", input="/echo hello from python")
    check(response.status == "completed", f"status {response.status}")
    check(response.output_text == "hello from python", f"text {response.output_text!r}")
    check(response.id.startswith("resp_"), response.id)
    check(client.responses.delete(response.id) is None, "delete")
    try:
        client.responses.retrieve(response.id)
        raise AssertionError("a deleted response was found")
    except openai.NotFoundError:
        pass

    events = list(client.responses.create(model="scripted", input="/echo streamed here", stream=True))
    check(numbers(events) == list(range(len(events))), f"numbers {numbers(events)}")
    check(events[0].type == "response.created", events[0].type)
    check(events[-1].type == "response.completed", events[-1].type)
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    check(deltas == "streamed here", deltas)

    with client.responses.stream(model="scripted", input="/echo through the helper") as stream:
        seen = list(stream)
        final = stream.get_final_response()
    check(text_of(final) == "through the helper", text_of(final))
    check(numbers(seen) == list(range(len(seen))), "helper numbers")


def resumes(client):
    cut_at = 6
    live = []
    for event in client.responses.create(
        model="scripted", input="tell me a story", background=True, stream=True
    ):
        live.append(event)
        if event.sequence_number >= cut_at:
            break
    check(live[0].response.status == "queued", live[0].response.status)
    response_id = live[0].response.id

    polled = client.responses.retrieve(response_id)
    check(polled.status in ("queued", "in_progress", "completed"), polled.status)

    rest = list(client.responses.retrieve(response_id, stream=True, starting_after=cut_at))
    check(numbers(rest) == list(range(cut_at + 1, cut_at + 1 + len(rest))), f"rest {numbers(rest)}")
    check(rest[-1].type == "response.completed", rest[-1].type)

    whole = list(client.responses.retrieve(response_id, stream=True))
    dump = lambda events: [event.model_dump() for event in events]
    check(dump(whole[: cut_at + 1]) == dump(live), "the replay differs from the live stream")
    check(dump(whole[cut_at + 1 :]) == dump(rest), "the replay differs from the resumed stream")

    with client.responses.stream(response_id=response_id, starting_after=cut_at) as stream:
        resumed = list(stream)
        final = stream.get_final_response()
    check(numbers(resumed) == numbers(rest), f"helper resumed {numbers(resumed)}")
    check(final.status == "completed", final.status)
    text = "".join(e.delta for e in whole if e.type == "response.output_text.delta")
    check(text_of(final) == text, "the helper's final text")
    check(client.responses.retrieve(response_id).output_text == text, "retrieved text")


def cancels(client):
    queued = client.responses.create(model="scripted", input="/stall 30", background=True)
    check(queued.status == "queued", queued.status)
    check(client.responses.cancel(queued.id).status == "cancelled", "cancel")
    check(client.responses.cancel(queued.id).status == "cancelled", "cancel again")
    check(client.responses.retrieve(queued.id).status == "cancelled", "retrieve after cancel")


def function_tools(client, base_url):
    asked = client.responses.create(model="scripted", input='/tools confirm {"q": 1}', tools=[CONFIRM_TOOL])
    calls = [item for item in asked.output if item.type == "function_call"]
    check(len(calls) == 1 and calls[0].name == "confirm", f"calls {calls}")
    check(json.loads(calls[0].arguments) == {"q": 1}, calls[0].arguments)
    answer = [{"type": "function_call_output", "call_id": calls[0].call_id, "output": "yes"}]
    chained = client.responses.create(
        model="scripted", previous_response_id=asked.id, input=answer, tools=[CONFIRM_TOOL]
    )
    check(chained.status == "completed" and "yes" in chained.output_text, chained.output_text)

    requests = []
    counting = OpenAI(
        base_url=f"{base_url}/v1",
        api_key="unused",
        http_client=openai.DefaultHttpxClient(event_hooks={"request": [requests.append]}),
    )
    try:
        counting.responses.create(model="scripted", previous_response_id=asked.id, input=answer)
        raise AssertionError("a second answer was taken")
    except openai.ConflictError:
        pass
    check(len(requests) == 1, f"the refusal was sent {len(requests)} times")

    second = client.responses.create(model="scripted", input='/tools confirm {"q": 2}', tools=[CONFIRM_TOOL])
    call = next(item for item in second.output if item.type == "function_call")
    transcript = [{"role": "user", "content": '/tools confirm {"q": 2}'}]
    transcript += [item.model_dump(exclude_none=True) for item in second.output]
    transcript.append({"type": "function_call_output", "call_id": call.call_id, "output": "no"})
    resent = client.responses.create(model="scripted", input=transcript, tools=[CONFIRM_TOOL])
    check(resent.status == "completed" and "no" in resent.output_text, resent.output_text)
    items = client.responses.input_items.list(resent.id)
    check([item.type for item in items.data] == ["function_call_output"], f"input items {items.data}")


def errors(client):
    try:
        client.responses.retrieve("resp_" + "0" * 32)
        raise AssertionError("an unknown response was found")
    except openai.NotFoundError:
        pass
    try:
        client.responses.create(model="scripted", input=3)
        raise AssertionError("a number was taken as input")
    except openai.BadRequestError as error:
        check("input must be" in str(error), str(error))


async def agents(base_url):
    from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

    set_default_openai_client(openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused"), use_for_tracing=False)
    set_tracing_disabled(True)
    called = []

    @function_tool
    def confirm(q: int) -> str:
        """Confirm a number with the user."""
        called.append(q)
        return f"confirmed {q}"

    agent = Agent(name="assistant", instructions="Be brief.", model="scripted", tools=[confirm])
    result = await Runner.run(agent, '/tools confirm {"q": 3}')
    check(called == [3], f"called {called}")
    check("confirmed 3" in result.final_output, result.final_output)

    streamed = Runner.run_streamed(agent, '/tools confirm {"q": 4}')
    kinds = set()
    async for event in streamed.stream_events():
        kinds.add(event.type)
    check(called == [3, 4], f"called {called}")
    check("confirmed 4" in streamed.final_output, streamed.final_output)
    check("raw_response_event" in kinds and "run_item_stream_event" in kinds, f"events {kinds}")


def main():
    base_url = sys.argv[1]
    client = OpenAI(base_url=f"{base_url}/v1", api_key="not-needed-by-an-open-server")
    for step in (creates, resumes, cancels, errors):
        step(client)
    function_tools(client, base_url)
    if "--agents" in sys.argv:
        asyncio.run(agents(base_url))
    print(f"openai {openai.__version__}: every check passed")


if __name__ == "__main__":
    main()
