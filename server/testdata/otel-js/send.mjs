// Sends one trace of GenAI-convention and OpenInference spans to a Loupe
// collector with the OpenTelemetry JS SDK, then prints {"trace_id", "spans":
// {name: span id}} as JSON. Usage: node send.mjs URL proto|json|grpc [API_KEY]
// (grpc: URL is the OTLP/gRPC address, http://127.0.0.1:4317, and the key
// goes in the metadata as OTEL_EXPORTER_OTLP_TRACES_HEADERS would set it).
import { trace, context, SpanStatusCode, SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JSONExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as GRPCExporter } from '@opentelemetry/exporter-trace-otlp-grpc';

const [url, mode, key] = process.argv.slice(2);
let exporter;
if (mode === 'grpc') {
  if (key) {
    process.env.OTEL_EXPORTER_OTLP_TRACES_HEADERS = 'authorization=' + encodeURIComponent('Bearer ' + key);
  }
  exporter = new GRPCExporter({ url, compression: 'gzip' });
} else {
  const Exporter = mode === 'json' ? JSONExporter : ProtoExporter;
  exporter = new Exporter({
    url: url + '/v1/traces',
    headers: key ? { Authorization: 'Bearer ' + key } : {},
    compression: mode === 'json' ? 'none' : 'gzip',
  });
}
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'js-agent-' + mode }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const tracer = provider.getTracer('loupe-js-test', '1.0.0');
const ids = {};
const start = (name, attributes, parent, kind) => {
  const ctx = parent ? trace.setSpan(context.active(), parent) : context.active();
  const span = tracer.startSpan(name, { attributes, kind: kind ?? SpanKind.INTERNAL }, ctx);
  ids[name] = span.spanContext().spanId;
  return span;
};

const agent = start('invoke_agent travel', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'travel' });
const chat = start('chat gpt-4o-mini', {
  'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o-mini',
  'gen_ai.usage.input_tokens': 200, 'gen_ai.usage.output_tokens': 20, 'gen_ai.response.finish_reasons': ['tool_calls'],
  'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'tool_call', name: 'weather', arguments: { city: 'Oslo' } }] }]),
}, agent, SpanKind.CLIENT);
chat.end();
const tool = start('execute_tool weather', {
  'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'weather',
  'gen_ai.tool.call.arguments': '{"city":"Oslo"}', 'gen_ai.tool.call.result': '{"temp":-3}',
}, agent);
tool.end();
const failing = start('execute_tool book', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'book' }, agent);
failing.recordException(new Error('sold out'));
failing.setStatus({ code: SpanStatusCode.ERROR, message: 'sold out' });
failing.end();
const llm = start('ChatModel', {
  'openinference.span.kind': 'LLM', 'llm.model_name': 'claude-haiku', 'llm.token_count.prompt': 11, 'llm.token_count.completion': 4,
  'llm.input_messages.0.message.role': 'user', 'llm.input_messages.0.message.content': 'weather?',
}, agent);
llm.end();
const tool2 = start('lookup', { 'openinference.span.kind': 'TOOL', 'tool.name': 'lookup', 'input.value': '{"id":1}', 'output.value': 'found' }, agent);
tool2.end();
agent.end();
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ trace_id: agent.spanContext().traceId, spans: ids }));
