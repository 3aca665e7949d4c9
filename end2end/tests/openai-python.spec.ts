// The official `openai` Python client at both pinned ends (1.109.1, the last 1.x — background
// resume exists since 1.82 — and 3.57.0) and the OpenAI Agents SDK for Python (openai-agents
// 0.24.0, on openai 3), unchanged, against the server: end2end/openai/python/check_responses.py
// in the virtual environments scripts/install.sh makes from the pinned requirements files.
import { expect, test } from "@playwright/test";
import { execFile } from "node:child_process";
import * as path from "node:path";

const directory = path.resolve(__dirname, "..", "openai", "python");

function check(set: string, baseURL: string, ...flags: string[]): Promise<string> {
  const python = path.join(directory, `.venv-${set}`, "bin", "python");
  return new Promise((resolve, reject) => {
    execFile(
      python,
      [path.join(directory, "check_responses.py"), baseURL, ...flags],
      { timeout: 120_000 },
      (error, stdout, stderr) => (error ? reject(new Error(`${stdout}\n${stderr}`)) : resolve(stdout)),
    );
  });
}

test("openai 1.109.1 (Python): streamed and not, background resume both ways, cancel, function tools", async ({
  baseURL,
}) => {
  expect(await check("openai1", baseURL!)).toContain("openai 1.109.1: every check passed");
});

test("openai 3.57.0 (Python) and an openai-agents 0.24.0 agent with a local tool", async ({ baseURL }) => {
  expect(await check("openai3", baseURL!, "--agents")).toContain("openai 3.57.0: every check passed");
});
