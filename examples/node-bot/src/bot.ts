// A team chat bot's calls to the taskzilla-sleep worker, typed by the worker's OpenAPI schema:
// `src/api.d.ts` is generated from /openapi.json by openapi-typescript (npm run generate), and
// openapi-fetch checks every path, parameter and body against it at compile time.
//
//   TASKZILLA_URL=http://127.0.0.1:8765 TASKZILLA_TEAM=platform \
//   TASKZILLA_READ_TOKEN=... TASKZILLA_WRITE_TOKEN=... node dist/bot.js
import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

type Episode = components["schemas"]["EpisodeIn"];
type ApiError = components["schemas"]["ErrorResponse"];

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name}`);
  return value;
};
const baseUrl = env("TASKZILLA_URL");
const team = env("TASKZILLA_TEAM");
const reader = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${env("TASKZILLA_READ_TOKEN")}` } });
const writer = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${env("TASKZILLA_WRITE_TOKEN")}` } });
const GUEST = "guest-visitor"; // the author who asks to be forgotten
const problems: string[] = [];

// Every failure has one shape: {"error": {"code", "message", "details"}}.
function ok<T>(what: string, r: { data?: T; error?: ApiError; response: Response }): T {
  if (r.data === undefined) {
    throw new Error(`${what}: ${r.response.status} ${r.error?.error.code}: ${r.error?.error.message}`);
  }
  return r.data;
}

// Busy (429: ingests queued, or a night holds the memory) means: retry after Retry-After seconds.
async function patiently<R extends { response: Response }>(call: () => Promise<R>): Promise<R> {
  for (let attempt = 0; ; attempt++) {
    const r = await call();
    if (r.response.status !== 429 || attempt === 5) return r;
    const wait = Number(r.response.headers.get("Retry-After") ?? "1");
    await new Promise((done) => setTimeout(done, wait * 1000));
  }
}

const minutesAgo = (n: number) => new Date(Date.now() - n * 60_000).toISOString();
const said: [string, Episode["provenance"], string][] = [
  ["lena", "human", "The on-call handover is every Monday at 10:00 in #ops."],
  ["martin", "human", "Reminder: on-call handover happens Mondays at 10:00."],
  ["sara", "human", "We do the on-call handover on Monday mornings at 10."],
  [GUEST, "human", "As a guest I joined the on-call handover on Monday, thanks all."],
  ["helper-bot", "ai-draft", "Draft answer: the on-call handover might be on Tuesdays?"],
];
const episodes: Episode[] = said.map(([author, provenance, text], i) => ({
  id: `${team}-node-bot-${i}`, // stable ids: sending the batch again stores nothing twice
  team,
  channel: "ops",
  author,
  text,
  ts: minutesAgo(said.length - i),
  provenance,
}));

const stored = ok("ingest", await patiently(() => writer.POST("/v1/episodes", { body: { episodes } })));
console.log(`ingested: ${stored.new} new, ${stored.present} already present`);

const found = ok(
  "recall",
  await reader.GET("/v1/recall", { params: { query: { q: "when is the on-call handover?", team, k: 8 } } }),
);
console.log(`recall: ${found.items.length} items`);
for (const item of found.items) {
  const cite = item.kind === "episode" ? `${item.author} in #${item.channel}` : `${item.evidence_count} messages`;
  console.log(`  [${item.kind}] ${JSON.stringify(item.text)} (${cite}, ${item.time ?? "no time"})`);
  if (item.team !== team) problems.push(`recall returned an item of team ${item.team}`);
  if (item.draft || item.provenance === "ai-draft") problems.push(`recall returned the bot's own draft ${item.id}`);
}

const open = ok("contradictions", await reader.GET("/v1/contradictions", { params: { query: { team } } }));
console.log(`contradictions open: ${open.length}`);
const first = open[0];
if (first) {
  console.log(`  old: ${JSON.stringify(first.old)}\n  new: ${JSON.stringify(first.new)}`);
  const done = ok(
    "resolve",
    await writer.POST("/v1/contradictions/{contradiction_id}/resolve", {
      params: { path: { contradiction_id: first.contradiction.id } },
      body: { keep: "new", note: "confirmed by the node bot" },
    }),
  );
  console.log(`resolved ${done.id}: keep ${done.resolution}, by ${done.resolved_by}`);
}

const forgot = ok(
  "forget",
  await patiently(() =>
    writer.POST("/v1/forget", { body: { team, author: GUEST, reason: "asked to be forgotten" } }),
  ),
);
console.log(`forgot ${GUEST}: ${(forgot.episodes_forgotten ?? []).length} episodes, by ${forgot.by}`);
const after = ok(
  "recall",
  await reader.GET("/v1/recall", { params: { query: { q: "on-call handover guest", team, k: 20 } } }),
);
if (after.items.some((i) => i.author === GUEST)) problems.push(`${GUEST} is still recalled after forget`);

const refused = await reader.POST("/v1/episodes", { body: { episodes: episodes.slice(0, 1) } });
if (refused.error) {
  console.log(`read token refused a write: ${refused.response.status} ${refused.error.error.code}`);
  if (refused.response.status !== 403) problems.push(`the read token's write got ${refused.response.status}, not 403`);
} else {
  problems.push("the read token was allowed to write");
}

for (const p of problems) console.error(`PROBLEM: ${p}`);
console.log(problems.length ? "failed" : "ok");
process.exitCode = problems.length ? 1 : 0;
