// Starts Swagger UI on the served OpenAPI document; the page's "Authorize" takes an API token and
// "Try it out" sends requests to this same server. A file rather than an inline script, so that the
// page's Content-Security-Policy can allow scripts of this origin only.
window.ui = SwaggerUIBundle({
  url: "/api/v1/openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  // No badge from validator.swagger.io: the page fetches nothing from elsewhere.
  validatorUrl: null,
  deepLinking: true,
  displayRequestDuration: true,
});
