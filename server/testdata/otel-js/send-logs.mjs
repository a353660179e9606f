// Sends one trace of GenAI spans and the log records written in them to a
// Loupe collector with the OpenTelemetry JS SDK (sdk-trace-base and
// sdk-logs), then prints {"trace_id", "spans": {name: span id}} as JSON.
// Usage: node send-logs.mjs URL proto|json|grpc logs-first|spans-first
// [API_KEY] (grpc: URL is the OTLP/gRPC address). logs-first exports every
// log record before any span; spans-first the other way round. The log
// records: GenAI content events in the chat span (gen_ai.user.message,
// gen_ai.choice, gen_ai.client.inference.operation.details), an
// application log in the tool span, an error log in the agent span, and
// one log record outside any span, which the collector rejects.
import { trace, context, SpanKind } from '@opentelemetry/api';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtoSpans } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JSONSpans } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as GRPCSpans } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPLogExporter as ProtoLogs } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPLogExporter as JSONLogs } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as GRPCLogs } from '@opentelemetry/exporter-logs-otlp-grpc';

const [url, mode, order, key] = process.argv.slice(2);
let spanExporter, logExporter;
if (mode === 'grpc') {
  if (key) {
    const h = 'authorization=' + encodeURIComponent('Bearer ' + key);
    process.env.OTEL_EXPORTER_OTLP_TRACES_HEADERS = h;
    process.env.OTEL_EXPORTER_OTLP_LOGS_HEADERS = h;
  }
  spanExporter = new GRPCSpans({ url, compression: 'gzip' });
  logExporter = new GRPCLogs({ url, compression: 'gzip' });
} else {
  const headers = key ? { Authorization: 'Bearer ' + key } : {};
  const compression = mode === 'json' ? 'none' : 'gzip';
  const [Spans, Logs] = mode === 'json' ? [JSONSpans, JSONLogs] : [ProtoSpans, ProtoLogs];
  spanExporter = new Spans({ url: url + '/v1/traces', headers, compression });
  logExporter = new Logs({ url: url + '/v1/logs', headers, compression });
}

// Records are held back and exported in the order asked for.
const held = { spans: [], logs: [] };
const holdSpans = { export: (s, done) => { held.spans.push(...s); done({ code: 0 }); }, shutdown: async () => {} };
const holdLogs = { export: (l, done) => { held.logs.push(...l); done({ code: 0 }); }, shutdown: async () => {} };
const resource = resourceFromAttributes({ 'service.name': 'js-logs-' + mode });
const tracerProvider = new BasicTracerProvider({ resource, spanProcessors: [new SimpleSpanProcessor(holdSpans)] });
const loggerProvider = new LoggerProvider({ resource, processors: [new SimpleLogRecordProcessor({ exporter: holdLogs })] });
const tracer = tracerProvider.getTracer('loupe-js-test', '1.0.0');
const genai = loggerProvider.getLogger('opentelemetry.instrumentation.genai', '1.0.0');
const app = loggerProvider.getLogger('weather.app', '1.0.0');

const ids = {};
const start = (name, attributes, parent, kind) => {
  const ctx = parent ? trace.setSpan(context.active(), parent) : context.active();
  const span = tracer.startSpan(name, { attributes, kind: kind ?? SpanKind.INTERNAL }, ctx);
  ids[name] = span.spanContext().spanId;
  return span;
};
const inSpan = (span) => trace.setSpan(context.active(), span);

const agent = start('invoke_agent weather', { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'weather' });
const chat = start('chat gpt-4o-mini', {
  'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o-mini',
  'gen_ai.usage.input_tokens': 50, 'gen_ai.usage.output_tokens': 9,
}, agent, SpanKind.CLIENT);
genai.emit({ eventName: 'gen_ai.user.message', context: inSpan(chat), severityNumber: SeverityNumber.INFO,
  body: { content: 'Weather in Oslo?' }, attributes: { 'gen_ai.provider.name': 'openai' } });
genai.emit({ eventName: 'gen_ai.choice', context: inSpan(chat), severityNumber: SeverityNumber.INFO,
  body: { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'Cold: -3C.' } } });
genai.emit({ eventName: 'gen_ai.client.inference.operation.details', context: inSpan(chat), attributes: {
  'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: 'Be brief.' }]),
  'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Weather in Oslo?' }] }]),
  'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Cold: -3C.' }], finish_reason: 'stop' }]),
} });
chat.end();
const tool = start('execute_tool forecast', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'forecast' }, agent);
app.emit({ context: inSpan(tool), severityNumber: SeverityNumber.INFO, severityText: 'INFO',
  body: 'fetching forecast', attributes: { city: 'Oslo', attempt: 1 } });
tool.end();
app.emit({ context: inSpan(agent), severityNumber: SeverityNumber.ERROR, severityText: 'ERROR', body: 'cache unavailable' });
agent.end();
app.emit({ context: trace.deleteSpan(context.active()), severityNumber: SeverityNumber.INFO, body: 'outside any trace' });

await tracerProvider.forceFlush();
await loggerProvider.forceFlush();
const sendSpans = () => new Promise((resolve, reject) => spanExporter.export(held.spans, r => r.code === 0 ? resolve() : reject(r.error ?? new Error('span export failed'))));
const sendLogs = () => new Promise((resolve, reject) => logExporter.export(held.logs, r => r.code === 0 ? resolve() : reject(r.error ?? new Error('log export failed'))));
if (order === 'logs-first') {
  await sendLogs();
  await sendSpans();
} else {
  await sendSpans();
  await sendLogs();
}
await spanExporter.shutdown();
await logExporter.shutdown();
console.log(JSON.stringify({ trace_id: agent.spanContext().traceId, spans: ids }));
