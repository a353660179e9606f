// An MCP client built with the MCP TypeScript SDK (pinned in
// testdata/mcp-js at the repository root, installed by scripts/mcp-js.sh).
// It connects to Loupe's MCP server, lists the tools, calls each of them
// (good and bad arguments) and prints what it saw as one JSON object, which
// TestTypeScriptClient asserts on. The SDK validates every structured
// result against the tool's output schema, so a result that does not match
// its schema fails here.
//
//   node client.mjs stdio COMMAND [ARG...]   (the environment is passed on)
//   node client.mjs http URL
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = process.env.MCP_JS;
if (!root) throw new Error('MCP_JS must name the testdata/mcp-js folder');
const sdk = (p) => import(pathToFileURL(join(root, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const [mode, target, ...rest] = process.argv.slice(2);
const transport = mode === 'stdio'
  ? new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: 'loupe-ts-test', version: '1.0.0' });
await client.connect(transport);

const text = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const out = {};
out.server = client.getServerVersion()?.name;
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, required: t.inputSchema.required ?? [], output_schema: !!t.outputSchema })).sort((a, b) => a.name.localeCompare(b.name));

const run = await client.callTool({ name: 'run_agent_with_trace', arguments: { query: 'What is 17% of 2340?', thread_id: 'ts-' + mode } });
const id = run.structuredContent?.trace_summary?.trace_id;
out.run = { is_error: !!run.isError, success: run.structuredContent?.success, result: run.structuredContent?.result, trace_id: id, steps: run.structuredContent?.steps?.length, thinking: run.structuredContent?.thinking?.length };

const got = await client.callTool({ name: 'get_execution_trace', arguments: { trace_id: id, step_limit: 2, include_memory: true } });
out.get = { is_error: !!got.isError, trace_id: got.structuredContent?.trace_summary?.trace_id, steps: got.structuredContent?.steps?.length, next_step_offset: got.structuredContent?.next_step_offset, total_steps: got.structuredContent?.total_steps };

const list = await client.callTool({ name: 'list_traces', arguments: { limit: 5 } });
out.list = (list.structuredContent?.traces ?? []).map((t) => t.trace_id);

const search = await client.callTool({ name: 'search_traces', arguments: { query: 'tag:thread:ts-' + mode, step_type: 'tool_end' } });
out.search = (search.structuredContent?.traces ?? []).map((t) => t.trace_id);

const bad = await client.callTool({ name: 'run_agent_with_trace', arguments: { thread_id: 'no query' } });
out.bad = { is_error: !!bad.isError, text: text(bad) };

const del = await client.callTool({ name: 'delete_trace', arguments: { trace_id: id } });
out.delete = { is_error: !!del.isError, deleted: del.structuredContent?.deleted };
const gone = await client.callTool({ name: 'get_execution_trace', arguments: { trace_id: id } });
out.after_delete = { is_error: !!gone.isError, text: text(gone) };

await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
