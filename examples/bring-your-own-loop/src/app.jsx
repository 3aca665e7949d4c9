// The browser side: `useChat` sends to the app's own backend (which runs its own `streamText`)
// and resumes from agentstream — a reload mid-answer picks the answer up where agentstream has
// it, exactly once — with a read-only token the backend minted for this user's chat.
import { useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";

function App({ user }) {
  const [session, setSession] = useState();
  const [error, setError] = useState();
  useEffect(() => {
    (async () => {
      const response = await fetch("/api/session", { method: "POST", body: JSON.stringify({ user }) });
      if (!response.ok) throw new Error(`session: ${response.status}`);
      const session = await response.json();
      // The conversation so far, from agentstream (without an answer still streaming: resume
      // brings that).
      const history = await fetch(`${session.agentstream}/v1/ai-sdk/chat/${session.chatId}/messages`, {
        headers: { Authorization: `Bearer ${session.token}` },
      });
      if (!history.ok) throw new Error(`history: ${history.status}`);
      setSession({ ...session, messages: await history.json() });
    })().catch((failure) => setError(String(failure)));
  }, [user]);
  if (error) return <p className="error">{error}</p>;
  if (!session) return <p>Loading…</p>;
  return <Chat session={session} />;
}

function Chat({ session }) {
  const { agentstream, chatId, token } = session;
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        // Sending goes to the app's own loop …
        api: "/api/chat",
        // … resuming goes to agentstream, which has every reply the loop piped in.
        prepareReconnectToStreamRequest: ({ id }) => ({
          api: `${agentstream}/v1/ai-sdk/chat/${id}/stream`,
          headers: { Authorization: `Bearer ${token}` },
        }),
      }),
    [agentstream, token],
  );
  const { messages, sendMessage, status, error } = useChat({
    id: chatId,
    messages: session.messages,
    transport,
    resume: true,
  });
  const [input, setInput] = useState("");
  const busy = status === "submitted" || status === "streaming";
  return (
    <>
      <h1>Your loop, agentstream's log</h1>
      <section aria-label="messages">
        {messages.map((message) => (
          <div key={message.id} className="message" data-role={message.role}>
            <strong>{message.role === "user" ? "You" : "Assistant"}: </strong>
            {message.parts.map((part, index) => {
              if (part.type === "text") return <span key={index} className="text">{part.text}</span>;
              if (part.type === "dynamic-tool" || part.type.startsWith("tool-")) {
                const name = part.toolName ?? part.type.slice("tool-".length);
                return (
                  <div key={index} className="tool" data-tool={name} data-state={part.state}>
                    {name}() {part.state === "output-available" && `= ${JSON.stringify(part.output)}`}
                  </div>
                );
              }
              return null;
            })}
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
      </form>
      <p data-status={status}>status: {status}</p>
    </>
  );
}

const user = new URLSearchParams(location.search).get("user") ?? "guest";
createRoot(document.getElementById("root")).render(<App user={user} />);
