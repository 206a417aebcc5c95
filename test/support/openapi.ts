import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsPlugin from "ajv-formats";
import { expect } from "vitest";

// ajv-formats is CommonJS: under NodeNext its default import is the module object.
const addFormats = addFormatsPlugin as unknown as typeof addFormatsPlugin.default;

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: object }> }>;
}
export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, object>; securitySchemes?: Record<string, object> };
}

interface App {
  request(path: string): Response | Promise<Response>;
}

/** Fetches `/openapi.json` and checks it is a valid OpenAPI 3.1 document. */
export async function fetchDocument(app: App): Promise<OpenApiDocument> {
  const response = await app.request("/openapi.json");
  expect(response.status).toBe(200);
  const document = (await response.json()) as OpenApiDocument;
  const validator = new Validator();
  const result = await validator.validate(document as unknown as Record<string, unknown>);
  expect(result.errors ?? []).toEqual([]);
  expect(result.valid).toBe(true);
  expect(validator.version).toBe("3.1");
  return document;
}

/**
 * `expectDocumented(response, method, path)` checks a real response against the document: its
 * status is declared for the operation and its JSON body matches that status's schema (JSON
 * Schema 2020-12, the dialect of OpenAPI 3.1). Objects are closed for the check, so a field the
 * document does not name fails it too.
 */
export function responseChecker(document: OpenApiDocument) {
  const ajv = new Ajv2020({ allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addKeyword("example");
  const compiled = new Map<string, ValidateFunction>();

  function validatorFor(method: string, path: string, status: number): ValidateFunction {
    const key = `${method} ${path} ${status}`;
    const cached = compiled.get(key);
    if (cached) return cached;
    const operation = document.paths[path]?.[method];
    expect(operation, `${method.toUpperCase()} ${path} is in the document`).toBeDefined();
    const declared = operation?.responses[String(status)];
    expect(declared, `${method.toUpperCase()} ${path} declares ${status}`).toBeDefined();
    const schema = declared?.content?.["application/json"]?.schema;
    expect(schema, `${method.toUpperCase()} ${path} ${status} has a JSON schema`).toBeDefined();
    const validate = ajv.compile(closed(withComponents(schema as object, document)));
    compiled.set(key, validate);
    return validate;
  }

  return async function expectDocumented(
    response: Response,
    method: "get" | "post" | "put" | "delete",
    path: string,
  ) {
    const validate = validatorFor(method, path, response.status);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    const body: unknown = await response.clone().json();
    const valid = validate(body);
    expect(
      valid ? [] : validate.errors,
      `${method.toUpperCase()} ${path} ${response.status}: ${JSON.stringify(body)}`,
    ).toEqual([]);
  };
}

/** The schema with the document's component schemas as `$defs`, so its `$ref`s resolve. */
function withComponents(schema: object, document: OpenApiDocument): object {
  const text = JSON.stringify({ ...schema, $defs: document.components?.schemas ?? {} });
  return JSON.parse(text.replaceAll('"#/components/schemas/', '"#/$defs/')) as object;
}

/** Every object schema that names its properties, with no other properties allowed. */
function closed<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(closed) as T;
  if (typeof schema !== "object" || schema === null) return schema;
  const copy: Record<string, unknown> = Object.fromEntries(
    Object.entries(schema).map(([key, value]) => [key, closed(value)]),
  );
  if ("properties" in copy && !("additionalProperties" in copy)) copy.additionalProperties = false;
  return copy as T;
}
