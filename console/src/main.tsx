import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { loadConfig } from "./config";
import { restore } from "./auth";
import "./styles.css";

const root = createRoot(document.getElementById("root")!);

loadConfig()
  .then(restore)
  .then(() =>
    root.render(
      <StrictMode>
        <App />
      </StrictMode>,
    ),
  )
  .catch((e) => root.render(<p className="error">The console could not start: {String(e)}</p>));
