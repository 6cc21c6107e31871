#pragma once
// An actor: a thread that owns some state alone and changes it only in answer to messages
// from its mailbox. Subclasses implement handle() for one message and, optionally, idle()
// work between messages; run() returns when a handler asks to stop.

#include <memory>
#include <thread>

#include "actors/mailbox.h"

namespace pagoda {

template <typename Message>
class Actor {
 public:
  // An actor may be handed its mailbox, so that two actors can know each other's mailboxes
  // before either exists.
  explicit Actor(std::shared_ptr<Mailbox<Message>> mailbox = std::make_shared<Mailbox<Message>>())
      : mailbox_(std::move(mailbox)) {}
  virtual ~Actor() = default;

  void post(Message message) { mailbox_->post(std::move(message)); }

  // The mailbox, shared so a poster may outlive the actor (its late messages are then dropped).
  std::shared_ptr<Mailbox<Message>> mailbox() const { return mailbox_; }

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 protected:
  // The actor's loop. The default blocks for each message; the decode scheduler overrides it
  // to drain its mailbox between forward steps.
  virtual void run() {
    while (!stopped_) handle(mailbox_->receive());
  }

  virtual void handle(Message message) = 0;

  // The loop of an actor that works in steps (the decode and encoder schedulers): while it has
  // no work (`idle()`) it blocks for a message; then it handles everything waiting, and steps.
  template <class Idle, class Step>
  void step_loop(Idle&& idle, Step&& step) {
    while (!stopped_) {
      if (idle()) handle(mailbox_->receive());
      while (!stopped_) {
        auto message = mailbox_->try_receive();
        if (!message) break;
        handle(std::move(*message));
      }
      if (!stopped_) step();
    }
  }

  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

  std::shared_ptr<Mailbox<Message>> mailbox_;

 private:
  std::thread thread_;
  bool stopped_ = false;  // only the actor's own thread touches it
};

}  // namespace pagoda
