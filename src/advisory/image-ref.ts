// How an ImageRef's `repo` names a repo of the registry and the package its images are built from.
//
// `repo` is a repository path as a client writes it: `nginx`, `chainguard/nginx`, or with a registry host
// first (`cgr.dev/chainguard/nginx`, `localhost:5000/nginx`: as in OCI references, a first segment holding a
// `.` or a `:`, or `localhost`, followed by more segments, is a host and is dropped). The package is the last segment (the distribution names each image after its
// package). The repo is found in the registry when one the caller sees is named either the whole path (after
// the host) or its last segment. A tag or digest written into `repo` is refused: tags go in `tags`.
import { MAX_REPO_NAME_LENGTH, REPO_NAME_PATTERN } from "../registry/repos.validate.js";
import { TAG_NAME_PATTERN } from "../registry/tag-kind.js";

interface ParsedImageRef {
  /** The package the repo's images are built from: the path's last segment. */
  packageName: string;
  /** Repo names that designate this ref in the registry (the path after the host, and its last segment). */
  repoNames: string[];
}

/** The parsed ref, or a description of what is wrong with `repo`. */
export function parseImageRepo(repo: string): ParsedImageRef | string {
  if (repo === "") return "is required";
  if (repo.length > 512) return "must be at most 512 characters long";
  if (repo.includes("@")) return "must name a repository, not a digest";
  const segments = repo.split("/");
  const first = segments[0]!;
  if (segments.length > 1 && (first.includes(".") || first.includes(":") || first === "localhost")) segments.shift();
  if (segments[segments.length - 1]!.includes(":")) return "must name a repository without a tag: give tags in tags";
  const path = segments.join("/");
  if (path.length > MAX_REPO_NAME_LENGTH || !REPO_NAME_PATTERN.test(path)) {
    return 'must be a repository path: lowercase letters and digits, separated by ".", "_", "__", "-" or "/" (for example "nginx" or "cgr.dev/acme.com/nginx")';
  }
  const packageName = segments[segments.length - 1]!;
  return { packageName, repoNames: [...new Set([path, packageName])] };
}

/** Why a tag is not a valid OCI tag, or undefined. */
export function tagProblem(tag: string): string | undefined {
  return TAG_NAME_PATTERN.test(tag) ? undefined : "must be an OCI tag (letters, digits, '_', '.', '-'; at most 128 characters)";
}
