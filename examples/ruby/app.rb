# The course's XP award as a tiny web app, guarded the naive way (lesson 1's
# check-then-store). It is the starting point of the lesson 7 challenge:
# make it pass
#
#   idem challenge --url http://127.0.0.1:4567/lessons/1/complete \
#     --count-sql 'SELECT count(*) FROM experience_points' \
#     --count-database-url "$DATABASE_URL"
#
# Run it with a database of its own (it creates two tables there):
#
#   idem db -- ruby app.rb
#
# (`idem challenge --starter ruby` writes this file into the current folder;
# in a clone of idem it is examples/ruby/app.rb.)
#
# (idem db makes a disposable PostgreSQL, sets DATABASE_URL, and prints it.)
#
# Only Ruby's standard library and the pg gem (Debian: ruby, ruby-pg,
# ruby-webrick). PORT=0 picks a free port; the first line printed says which.

require "json"
require "pg"
require "webrick"

DATABASE_URL = ENV.fetch("DATABASE_URL") { abort "set DATABASE_URL to a database this app may create tables in" }
POOL_SIZE = 5
WORK_SECONDS = 0.02 # the award's service call: it keeps the race window open

# A fixed pool of connections, as ActiveRecord keeps one per app process.
class Pool
  def initialize(size)
    @free = Queue.new
    size.times { @free << PG.connect(DATABASE_URL) }
  end

  def with
    conn = @free.pop
    yield conn
  ensure
    @free << conn if conn
  end
end

POOL = Pool.new(POOL_SIZE)

POOL.with do |db|
  db.exec(<<~SQL)
    CREATE TABLE IF NOT EXISTS idempotency_keys (
      id bigserial PRIMARY KEY,
      key text NOT NULL UNIQUE,
      response_code integer NOT NULL,
      response_body text NOT NULL
    );
    CREATE TABLE IF NOT EXISTS experience_points (
      id bigserial PRIMARY KEY,
      user_id bigint NOT NULL,
      amount integer NOT NULL,
      lesson integer NOT NULL
    );
  SQL
end

# POST /lessons/:lesson/complete with {"user_id": N, "amount": N}
def complete(lesson, key, params)
  POOL.with do |db|
    # HINT (lesson 7, the 400): a request without a key cannot be retried
    # safely. The draft says to refuse it. Here it is simply let through.

    # Lesson 1's shape: look, then work, then store. Five requests at once
    # all look before any of them stores: each one does the work.
    # HINT (lesson 2): claim the key first, with an INSERT the unique index
    # decides (INSERT ... ON CONFLICT DO NOTHING RETURNING id), and only the
    # request whose claim went in does the work.
    existing = db.exec_params(
      "SELECT response_code, response_body FROM idempotency_keys WHERE key = $1", [key]
    ).first
    # HINT (lesson 4): this replays whatever was stored under the key, even
    # for a request that asked for another amount. Store a fingerprint of
    # the parameters and answer 422 when it differs.
    return [existing["response_code"].to_i, existing["response_body"]] if existing

    sleep WORK_SECONDS # the service call
    xp = db.exec_params(
      "INSERT INTO experience_points (user_id, amount, lesson) VALUES ($1, $2, $3) RETURNING id",
      [params["user_id"], params["amount"], lesson]
    ).first["id"].to_i
    body = JSON.generate(xp_id: xp, user_id: params["user_id"], amount: params["amount"], lesson: lesson)

    begin
      db.exec_params(
        "INSERT INTO idempotency_keys (key, response_code, response_body) VALUES ($1, 201, $2)",
        [key, body]
      )
    rescue PG::UniqueViolation
      # Rails: rescue ActiveRecord::RecordNotUnique. Another request stored
      # the key first; the XP row made above stays: duplicate work.
      # HINT (lesson 3): a request that loses the claim while the winner is
      # still working should answer 409 Conflict, not do the work again.
    end
    [201, body]
  end
end

def problem(status, code, detail)
  [status, "application/problem+json", JSON.generate(type: "about:blank", status: status, code: code, detail: detail)]
end

server = WEBrick::HTTPServer.new(
  BindAddress: "127.0.0.1",
  Port: Integer(ENV.fetch("PORT", "4567")),
  Logger: WEBrick::Log.new($stderr, WEBrick::Log::WARN),
  AccessLog: []
)

server.mount_proc "/lessons" do |req, res|
  lesson = req.path[%r{\A/lessons/(\d+)/complete\z}, 1]
  status, type, body =
    if lesson.nil?
      problem(404, "not_found", "try POST /lessons/1/complete")
    elsif req.request_method != "POST"
      problem(405, "method_not_allowed", "use POST")
    else
      params = JSON.parse(req.body || "") rescue nil
      if !params.is_a?(Hash) || !params["user_id"].is_a?(Integer) || !params["amount"].is_a?(Integer)
        problem(400, "invalid_body", 'send {"user_id": N, "amount": N}')
      else
        # The draft sends the key as a quoted string; bare tokens are common too.
        key = req["Idempotency-Key"].to_s.strip.delete_prefix('"').delete_suffix('"')
        code, json = complete(lesson.to_i, key, params)
        [code, "application/json", json]
      end
    end
  res.status = status
  res["Content-Type"] = type
  res.body = body
end

trap("INT") { server.shutdown }
trap("TERM") { server.shutdown }
port = server.listeners.first.addr[1]
puts "listening on http://127.0.0.1:#{port}"
$stdout.flush
server.start
