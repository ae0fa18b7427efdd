import { defineConfig, type Plugin } from "vite";
import react from "@vitejs/plugin-react";

// `npm run dev` (Vite on :5173, an origin `make dev` allows) calls the API that `make dev`
// runs; the build's own public/config.json names none, as the stack serves both.
const devConfig: Plugin = {
  name: "gridline-dev-config",
  configureServer(server) {
    server.middlewares.use("/config.json", (_req, res) => {
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ api: process.env.GRIDLINE_API ?? "http://127.0.0.1:3000", auth: "local" }));
    });
  },
};

// The build is static: `make dev` serves dist/ at / beside the API, and `make deploy` uploads
// it to the stack's bucket with a config.json naming the API and the user pool.
export default defineConfig({
  plugins: [react(), devConfig],
  build: { outDir: "dist", sourcemap: true, chunkSizeWarningLimit: 1024 },
});
