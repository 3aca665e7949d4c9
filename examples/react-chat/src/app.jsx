// The browser side: a React page on the app's own origin that talks to agentstream directly —
// `useChat` for the conversation (streaming, resume after a reload, stop, approvals) — with a
// short-lived token its backend minted for this user's one agent, renewed before it expires.
import { useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

/** The user's session with agentstream: `{agentstream, chatId, token, expiresAt}`, renewed
 * from the app's backend once half the token's life has passed — so a request (a stream, a
 * resume) always starts with half a lifetime ahead of it: a stream still open when its token
 * expires is ended by the server. One renewal at a time. */
function sessionKeeper(user) {
  let current;
  let renewAt = 0;
  let renewing;
  let renewals = 0;
  async function renew() {
    const response = await fetch("/api/session", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ user }),
    });
    if (!response.ok) throw new Error(`session: ${response.status} ${await response.text()}`);
    current = await response.json();
    const now = Date.now();
    renewAt = now + (Date.parse(current.expiresAt) - now) / 2;
    renewals += 1;
    document.body.dataset.tokenRenewals = String(renewals);
    return current;
  }
  return {
    async get() {
      if (!current || Date.now() >= renewAt) {
        renewing ??= renew().finally(() => (renewing = undefined));
        await renewing;
      }
      return current;
    },
  };
}

async function authorization(keeper) {
  return { Authorization: `Bearer ${(await keeper.get()).token}` };
}

function App({ user }) {
  const keeper = useMemo(() => sessionKeeper(user), [user]);
  const [loaded, setLoaded] = useState();
  const [error, setError] = useState();
  useEffect(() => {
    (async () => {
      const session = await keeper.get();
      // The conversation so far, without an answer still being written (resume brings that).
      const response = await fetch(`${session.agentstream}/v1/ai-sdk/chat/${session.chatId}/messages`, {
        headers: await authorization(keeper),
      });
      if (!response.ok) throw new Error(`history: ${response.status}`);
      setLoaded({ session, messages: await response.json() });
    })().catch((failure) => setError(String(failure)));
  }, [keeper]);
  if (error) return <p className="error">{error}</p>;
  if (!loaded) return <p>Loading…</p>;
  return <Chat keeper={keeper} session={loaded.session} initialMessages={loaded.messages} />;
}

function Chat({ keeper, session, initialMessages }) {
  const { agentstream, chatId } = session;
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: `${agentstream}/v1/ai-sdk/chat`,
        // Asked before every request (send, resume): always a live token.
        headers: () => authorization(keeper),
      }),
    [agentstream, keeper],
  );
  const { messages, sendMessage, status, stop, error, addToolApprovalResponse } = useChat({
    id: chatId,
    messages: initialMessages,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  const busy = status === "submitted" || status === "streaming";
  async function stopAnswer() {
    stop(); // stops reading …
    // … and this stops the run on the server (a client going away never does).
    await fetch(`${agentstream}/v1/ai-sdk/chat/${chatId}/stop`, {
      method: "POST",
      headers: await authorization(keeper),
    });
  }
  return (
    <>
      <h1>Chat</h1>
      <section aria-label="messages">
        {messages.map((message) => (
          <div
            key={message.id}
            className="message"
            data-role={message.role}
            data-run-id={message.metadata?.run_id ?? ""}
          >
            <strong>{message.role === "user" ? "You" : "Assistant"}: </strong>
            {message.parts.map((part, index) => (
              <Part key={index} part={part} answer={addToolApprovalResponse} />
            ))}
          </div>
        ))}
      </section>
      {error && <p className="error">{String(error.message ?? error)}</p>}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (!input.trim()) return;
          sendMessage({ text: input });
          setInput("");
        }}
      >
        <input aria-label="message" value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" disabled={busy}>Send</button>
        <button type="button" onClick={stopAnswer} disabled={!busy}>Stop</button>
      </form>
      <p data-status={status}>status: {status}</p>
    </>
  );
}

function Part({ part, answer }) {
  if (part.type === "text") return <span className="text">{part.text}</span>;
  if (part.type !== "dynamic-tool" && !part.type.startsWith("tool-")) return null;
  const name = part.toolName ?? part.type.slice("tool-".length);
  return (
    <div className="tool" data-tool={name} data-state={part.state}>
      {name}({JSON.stringify(part.input)})
      {part.state === "approval-requested" && (
        <>
          {" "}
          <button onClick={() => answer({ id: part.approval.id, approved: true })}>Approve</button>{" "}
          <button onClick={() => answer({ id: part.approval.id, approved: false, reason: "denied in the app" })}>
            Deny
          </button>
        </>
      )}
      {part.state === "output-available" && <span className="output"> = {JSON.stringify(part.output)}</span>}
      {part.state === "output-denied" && <span className="output"> denied</span>}
    </div>
  );
}

const user = new URLSearchParams(location.search).get("user") ?? "demo";
createRoot(document.getElementById("root")).render(<App user={user} />);
