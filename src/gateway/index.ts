// REST transcoding for the Platform API: routes read from google.api.http, calls made through the Connect router.
export { createRestGateway, type RestGateway } from "./gateway.js";
