// REST transcoding for the Platform API: routes read from google.api.http, calls made through the Connect router.
export { createRestGateway, type RestGateway, type RestGatewayOptions, type RestRoute } from "./gateway.js";
export { defaultMaxBodyBytes } from "./body.js";
