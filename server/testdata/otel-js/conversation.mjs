// Sends one conversation of a booking assistant to a Loupe collector with
// the OpenTelemetry JS SDK (OTLP/HTTP protobuf, gzip; one request a span,
// several in flight at once, as its SimpleSpanProcessor exports them),
// as the OpenTelemetry GenAI conventions write it: three runs (traces),
// each an invoke_agent span with the user's question and the answer, a
// chat span, and the tools the agent called. session.id and user.id sit on the chat span
// (as frameworks often put them) or on the root.
//
//   run 1  "Book a table for two at Nora tonight": find_restaurant, then
//          book → "Booked: 19:30 at Nora."
//   run 2  "Make it 20:00 instead": book alone → "Moved to 20:00."
//   run 3  "And send me the address": find_restaurant → "Nora, 12 Harbour St."
//
// Prints {"session", "user", "traces": [the runs' trace ids, in order]}.
// Usage: node conversation.mjs URL SESSION USER [API_KEY]
import { trace, context, SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';

const [url, session, user, key] = process.argv.slice(2);
if (!url || !session || !user) {
  console.error('usage: node conversation.mjs URL SESSION USER [API_KEY]');
  process.exit(2);
}
const exporter = new OTLPTraceExporter({
  url: url + '/v1/traces',
  headers: key ? { Authorization: 'Bearer ' + key } : {},
  compression: 'gzip',
});
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'booking-assistant' }),
  // The simple processor exports every span in its own request as the
  // span ends, without waiting for the requests before it: a run's root
  // span can reach the collector before its children, which the
  // collector's online rules must still see (they grade a run once it
  // has settled, not when its root arrives).
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const tracer = provider.getTracer('loupe-js-conversation', '1.0.0');
const messages = (role, text) => JSON.stringify([{ role, parts: [{ type: 'text', content: text }] }]);

// One run, at + its offsets in milliseconds from start: the root span, a
// chat span that asks for the tools, and one execute_tool span per call,
// each after the one before. ids go on the chat span, or on the root when
// onRoot. The root span is ended (with its own end time) before its
// children, so that its request leaves first and the collector commits
// the run's end before its tools, as happens when a root's export
// overtakes its children's.
const turn = (start, question, answer, tools, ids, onRoot) => {
  const at = (ms) => new Date(start + ms);
  const rootAttrs = {
    'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'concierge',
    'gen_ai.input.messages': messages('user', question), 'gen_ai.output.messages': messages('assistant', answer),
  };
  if (onRoot) Object.assign(rootAttrs, ids);
  const root = tracer.startSpan('invoke_agent concierge', { attributes: rootAttrs, kind: SpanKind.INTERNAL, startTime: at(0) });
  const ctx = trace.setSpan(context.active(), root);
  const children = [];
  const chatAttrs = {
    'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o-mini',
    'gen_ai.usage.input_tokens': 120, 'gen_ai.usage.output_tokens': 15,
  };
  if (!onRoot) Object.assign(chatAttrs, ids);
  children.push([tracer.startSpan('chat gpt-4o-mini', { attributes: chatAttrs, kind: SpanKind.CLIENT, startTime: at(5) }, ctx), at(25)]);
  tools.forEach(([name, args, result], i) => {
    children.push([tracer.startSpan('execute_tool ' + name, {
      attributes: {
        'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name,
        'gen_ai.tool.call.arguments': JSON.stringify(args), 'gen_ai.tool.call.result': JSON.stringify(result),
      },
      startTime: at(30 + 20 * i),
    }, ctx), at(40 + 20 * i)]);
  });
  root.end(at(100));
  for (const [span, end] of children) span.end(end);
  return root.spanContext().traceId;
};

const both = { 'session.id': session, 'user.id': user };
// The runs took place over the last minute, a few seconds apart.
const t0 = Date.now() - 60_000;
const traces = [];
traces.push(turn(t0, 'Book a table for two at Nora tonight', 'Booked: 19:30 at Nora.', [
  ['find_restaurant', { name: 'Nora' }, { id: 'nora', open: '18:00-23:00' }],
  ['book', { restaurant: 'nora', people: 2, time: '19:30' }, { confirmation: 'N-1930' }],
], both, false));
await provider.forceFlush();
traces.push(turn(t0 + 5_000, 'Make it 20:00 instead', 'Moved to 20:00.', [
  ['book', { restaurant: 'nora', people: 2, time: '20:00' }, { confirmation: 'N-2000' }],
], { 'session.id': session }, false));
await provider.forceFlush();
traces.push(turn(t0 + 10_000, 'And send me the address', 'Nora, 12 Harbour St.', [
  ['find_restaurant', { name: 'Nora' }, { id: 'nora', address: '12 Harbour St.' }],
], both, true));
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ session, user, traces }));
