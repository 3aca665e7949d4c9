import * as fs from "node:fs";

/** Removes the servers' databases (see playwright.config.ts) once every test has run. */
export default function globalTeardown() {
  const directory = process.env.AGENTSTREAM_E2E_DIRECTORY;
  if (directory) fs.rmSync(directory, { recursive: true, force: true });
}
