// Sends the runs of one conversation to a Loupe collector with the
// OpenTelemetry JS SDK: three traces (runs) whose spans carry session.id and
// user.id (on a child span, as frameworks often put them, or on the root),
// and one trace of no session. Prints {"session", "user", "traces": [trace
// ids of the session's runs, in order], "other": trace id} as JSON.
// Usage: node session.mjs URL proto|json [API_KEY]
import { trace, context, SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JSONExporter } from '@opentelemetry/exporter-trace-otlp-http';

const [url, mode, key] = process.argv.slice(2);
const Exporter = mode === 'json' ? JSONExporter : ProtoExporter;
const exporter = new Exporter({
  url: url + '/v1/traces',
  headers: key ? { Authorization: 'Bearer ' + key } : {},
  compression: mode === 'json' ? 'none' : 'gzip',
});
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'js-chat-' + mode }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const tracer = provider.getTracer('loupe-js-session-test', '1.0.0');
const session = 'conv-js-' + mode;
const user = 'ada-' + mode;
const messages = (role, text) => JSON.stringify([{ role, parts: [{ type: 'text', content: text }] }]);

// One run: an invoke_agent span with the question and the answer, a chat
// span, and a tool call. ids go on the root or on the chat span.
const turn = (question, answer, ids, onRoot) => {
  const rootAttrs = {
    'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'concierge',
    'gen_ai.input.messages': messages('user', question), 'gen_ai.output.messages': messages('assistant', answer),
  };
  if (ids && onRoot) Object.assign(rootAttrs, ids);
  const root = tracer.startSpan('invoke_agent concierge', { attributes: rootAttrs });
  const ctx = trace.setSpan(context.active(), root);
  const chatAttrs = {
    'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o-mini',
    'gen_ai.usage.input_tokens': 100, 'gen_ai.usage.output_tokens': 10,
  };
  if (ids && !onRoot) Object.assign(chatAttrs, ids);
  tracer.startSpan('chat gpt-4o-mini', { attributes: chatAttrs, kind: SpanKind.CLIENT }, ctx).end();
  tracer.startSpan('execute_tool lookup', {
    attributes: {
      'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup',
      'gen_ai.tool.call.arguments': JSON.stringify({ q: question }), 'gen_ai.tool.call.result': '"noted"',
    },
  }, ctx).end();
  root.end();
  return root.spanContext().traceId;
};

const ids = { 'session.id': session, 'user.id': user };
const pause = () => new Promise((resolve) => setTimeout(resolve, 5)); // runs start in order
const traces = [];
traces.push(turn('Book a table for two tonight', 'Booked: 19:30 at Nora.', ids, false));
await pause();
traces.push(turn('Make it 20:00 instead', 'Moved to 20:00.', { 'session.id': session }, false));
await pause();
traces.push(turn('And send me the address', 'Nora, 12 Harbour St.', ids, true));
const other = turn('Unrelated question', 'Unrelated answer.', null, false);
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ session, user, traces, other }));
