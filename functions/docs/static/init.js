// GET /docs: the API reference of the contract this host serves, rendered by the vendored Scalar
// bundle. Everything is same-origin (the page's Content-Security-Policy allows nothing else):
// no fonts, telemetry, AI agent or MCP from outside; requests from "Test Request" go to this host.
(function () {
  var here = new URL(".", document.baseURI).href.replace(/\/$/, "");
  Scalar.createApiReference("#app", {
    url: "openapi.json",
    servers: [{ url: here, description: "this host" }],
    telemetry: false,
    withDefaultFonts: false,
    showDeveloperTools: "never",
    hideClientButton: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    persistAuth: false,
    documentDownloadType: "json",
    authentication: { preferredSecurityScheme: "host" },
  });
})();
