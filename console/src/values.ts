// Field values between the API's shapes and form inputs.
import type { Field, Value } from "./api";

/** A value as a cell shows it. Numbers keep the API's digits (they are never floats here). */
export function show(field: Field | undefined, value: Value | undefined | null): string {
  if (value === undefined || value === null) return "";
  if (field?.type === "datetime" && typeof value === "string") return value.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC");
  return String(value);
}

/** What an input holds for `value`. */
export function toInput(field: Field, value: Value | undefined): string {
  if (value === undefined || value === null) return "";
  if (field.type === "datetime") return String(value).slice(0, 16);
  return String(value);
}

/**
 * The JSON value to send for an input's text: `null` removes the value. Numbers go as
 * strings in JSON number syntax, which the API takes digit for digit (38 digits survive).
 * A datetime input is read as UTC, as the API stores it.
 */
export function fromInput(field: Field, text: string): Value | null {
  const t = text.trim();
  if (t === "") return null;
  if (field.type === "datetime") return t.length === 16 ? `${t}:00Z` : t.endsWith("Z") ? t : `${t}Z`;
  return t;
}

export function inputType(field: Field): string {
  switch (field.type) {
    case "date":
      return "date";
    case "datetime":
      return "datetime-local";
    default:
      return "text";
  }
}
