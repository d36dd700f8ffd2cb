CREATE TABLE "server_secrets" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
